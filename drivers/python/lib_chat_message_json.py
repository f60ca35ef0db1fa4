def to_json(room: str, sender: str, text: str, edited: bool, tags: list[str]) -> str:
    def quoted(s: str) -> str:
        return '"' + escape(s) + '"'

    fields = [
        '"room":' + quoted(room),
        '"from":' + quoted(sender),
        '"text":' + quoted(text),
        '"edited":' + ("true" if edited else "false"),
        '"tags":[' + ",".join(quoted(t) for t in sorted(tags)) + "]",
    ]
    return "{" + ",".join(fields) + "}"


if __name__ == "__main__":
    def escape(s: str) -> str:
        return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    print(to_json("general", "ana", "hello", False, []))
    print(to_json("dev", "ben", 'say "hi"', True, ["urgent", "build"]))
    print(to_json("x", "", "line1\nline2", False, ["a\\b"]))
    print(to_json("ops", "cai", "{braces}", True, ["z"]))
