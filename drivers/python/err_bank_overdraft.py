def apply_batch(name: str, moves: list[tuple[str, str, int]]) -> bool:
    snapshot = dict(balances)
    try:
        for step, (src, dst, amount) in enumerate(moves):
            if src not in balances or dst not in balances:
                raise TransferError(step=step, reason="unknown account")
            if balances[src] < amount:
                raise TransferError(step=step, reason="insufficient funds")
            balances[src] -= amount
            balances[dst] += amount
        return True
    except TransferError as e:
        balances.clear()
        balances.update(snapshot)  # roll the whole batch back
        audit.append(f"{name} failed at {e.step}: {e.reason}")
        return False
    finally:
        audit.append(f"{name} closed")


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class TransferError(Exception):
        step: int
        reason: str

    balances = {"ann": 100, "bo": 50, "cy": 0}
    audit = []
    print(apply_batch("b1", [("ann", "bo", 30), ("bo", "cy", 70)]), balances)
    print(apply_batch("b2", [("cy", "ann", 70), ("cy", "bo", 1)]), balances)
    print(apply_batch("b3", [("ann", "bo", 10), ("zed", "bo", 1)]), balances)
    print(apply_batch("b4", []), balances)
    for a in audit:
        print(a)
