def longest_improvement(scores: list[int]) -> int:
    if not scores:
        return 0
    best = [1] * len(scores)  # best[i]: longest rising run ending at i
    for i in range(len(scores)):
        for j in range(i):
            if scores[j] < scores[i]:
                best[i] = max(best[i], best[j] + 1)
    return max(best)


if __name__ == "__main__":
    cases = [[], [70], [60, 60, 60], [50, 55, 52, 58, 61, 40, 70], [90, 80, 70, 60],
             [10, 20, 10, 30, 20, 50], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9]]
    for c in cases:
        print(f"{c} -> {longest_improvement(c)}")
