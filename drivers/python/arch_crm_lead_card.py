from dataclasses import dataclass, field
from enum import Enum, auto


class Source(Enum):
    WEB = auto()
    REFERRAL = auto()
    EVENT = auto()
    COLD = auto()


@dataclass
class Lead:
    name: str
    source: Source = Source.WEB
    emails_opened: int = 0
    tags: list[str] = field(default_factory=list)

    def score(self) -> int:
        bonus = {Source.REFERRAL: 30, Source.EVENT: 20, Source.WEB: 10, Source.COLD: 0}
        return min(bonus[self.source] + 5 * self.emails_opened + 3 * len(self.tags), 100)

    def card(self) -> str:
        s = self.score()
        tier = "hot" if s >= 60 else "warm" if s >= 30 else "cold"
        tag_text = ",".join(sorted(self.tags)) if self.tags else "-"
        return f"{{{self.name}|{self.source.name}|{s}|{tier}|{tag_text}}}"


if __name__ == "__main__":
    @dataclass
    class VipLead(Lead):
        account_manager: str = "none"

        def score(self) -> int:
            return min(super().score() + 25, 100)

    leads = [Lead(name="ann"),
             Lead(name="bo", source=Source.REFERRAL, emails_opened=4, tags=["saas", "eu"]),
             Lead(name="cy", source=Source.COLD, emails_opened=1),
             VipLead(name="di", source=Source.EVENT, emails_opened=3, account_manager="zoe"),
             VipLead(name="ed", source=Source.REFERRAL, emails_opened=20, tags=["b"])]
    for lead in leads:
        print(lead.card())
