def run_command(cmd: list[str]) -> str:
    match cmd:
        case ["give", med, amount]:
            n = int(amount)
            if n <= 0:
                raise ValueError("dose must be positive")
            return f"gave {n} mg of {med}"
        case ["hold", med]:
            return f"holding {med}"
        case ["check"]:
            return "all clear"
        case _:
            raise KeyError(" ".join(cmd))


if __name__ == "__main__":
    cmds = [["give", "ibuprofen", "400"], ["give", "saline", "-5"], ["give", "insulin", "ten"],
            ["hold", "warfarin"], ["check"], ["stop", "all", "now"], []]
    for c in cmds:
        try:
            print(run_command(c))
        except ValueError as e:
            print(f"value error: {str(e)}")
        except KeyError as e:
            print(f"unknown: {str(e)}")
