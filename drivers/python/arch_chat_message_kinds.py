from dataclasses import dataclass


@dataclass
class ChatMessage:
    sender: str
    body: str = ""

    def render(self) -> str:
        return f"<{self.sender}> {self.body}"

    def preview(self, width: int) -> str:
        text = self.render()
        return text if len(text) <= width else text[:width - 3] + "..."


@dataclass
class ImageMessage(ChatMessage):
    filename: str = ""
    size_kb: int = 0

    def render(self) -> str:
        size = f"{self.size_kb} KB" if self.size_kb < 1024 else f"{self.size_kb / 1024:.1f} MB"
        out = f"<{self.sender}> [image {self.filename}, {size}]"
        if self.body:
            out += " " + self.body
        return out


if __name__ == "__main__":
    @dataclass
    class SystemMessage(ChatMessage):
        def render(self) -> str:
            return f"* {self.body}"

    msgs = [ChatMessage(sender="ana", body="hi there"),
            ImageMessage(sender="ben", filename="cat.png", size_kb=512),
            ImageMessage(sender="cai", body="look!", filename="trip.jpg", size_kb=3500),
            ImageMessage(sender="dev", filename="x.gif", size_kb=1024),
            SystemMessage(sender="sys", body="eli joined"),
            ImageMessage(sender="eli", body="a much longer caption here", filename="long_name.png",
                         size_kb=0)]
    for m in msgs:
        print(m.render())
        print("  " + m.preview(24))
