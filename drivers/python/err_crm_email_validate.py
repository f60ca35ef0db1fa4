PERSONAL = ["gmail.com", "outlook.com", "yahoo.com"]


def classify(address: str) -> str:
    match address.strip().lower().split("@"):
        case [user, domain] if (user and "." in domain and not domain.startswith(".")
                                and not domain.endswith(".")):
            return "personal" if domain in PERSONAL else "work:" + domain
        case [user, _]:
            raise EmailError(address=address, code="bad-domain" if user else "no-user")
        case [_]:
            raise EmailError(address=address, code="missing-at")
        case _:
            raise ValueError("too many @")


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class EmailError(Exception):
        address: str
        code: str

    for a in ["Ann@Gmail.com", "bo@acme.io", "cy@localhost", "@acme.io", "di.acme.io", "e@@x.com",
              " fay@sub.corp.org ", "g@.com"]:
        try:
            print(f"{a.strip()}: {classify(a)}")
        except EmailError as e:
            print(f"{e.address.strip()}: invalid ({e.code})")
        except ValueError as e:
            print(f"{a.strip()}: error {str(e)}")
