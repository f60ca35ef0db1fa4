from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto


class Access(Enum):
    PUBLIC = auto()
    MEMBERS = auto()
    ADMINS = auto()


@dataclass
class WikiPage:
    title: str
    body: str = ""
    access: Access = Access.PUBLIC

    def can_read(self, role: str) -> bool:
        if self.access == Access.PUBLIC:
            return True
        if self.access == Access.MEMBERS:
            return role in ["member", "admin"]
        return role == "admin"

    def render(self, role: str) -> str:
        if not self.can_read(role):
            return f"[{self.title}] access denied"
        return f"[{self.title}] {self.body}"


@dataclass
class Redirect(WikiPage):
    target: WikiPage | None = None
    hops: int = 0

    def render(self, role: str) -> str:
        if self.hops >= 3:
            return f"[{self.title}] too many redirects"
        if self.target is None:
            return f"[{self.title}] broken redirect"
        return f"(via {self.title}) " + self.target.render(role)


if __name__ == "__main__":
    main = WikiPage(title="Main", body="welcome")
    staff = WikiPage(title="Staff", body="roster", access=Access.MEMBERS)
    keys = WikiPage(title="Keys", body="secrets", access=Access.ADMINS)
    pages = [main, staff, keys, Redirect(title="Start", target=main),
             Redirect(title="Team", target=Redirect(title="People", target=staff)),
             Redirect(title="Old"),
             Redirect(title="Loopy", target=main, hops=3)]
    for role in ["guest", "member", "admin"]:
        print(f"== {role}")
        for p in pages:
            print(p.render(role))
