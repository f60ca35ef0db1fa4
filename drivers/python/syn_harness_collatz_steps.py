def collatz_steps(n: int) -> int:
    steps = 0
    while n > 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


if __name__ == "__main__":
    for n in [1, 2, 3, 6, 7, 27]:
        print(f"{n} -> {collatz_steps(n)}")
