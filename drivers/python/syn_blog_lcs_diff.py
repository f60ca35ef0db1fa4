def diff_lines(old: list[str], new: list[str]) -> list[str]:
    n, m = len(old), len(new)
    lcs = [[0] * (m + 1) for _ in range(n + 1)]  # lcs[i][j]: LCS of old[i:] and new[j:]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if old[i] == new[j]:
                lcs[i][j] = lcs[i + 1][j + 1] + 1
            else:
                lcs[i][j] = max(lcs[i + 1][j], lcs[i][j + 1])
    out = []
    i = j = 0
    while i < n and j < m:
        if old[i] == new[j]:
            out.append("  " + old[i])
            i += 1
            j += 1
        elif lcs[i + 1][j] >= lcs[i][j + 1]:
            out.append("- " + old[i])
            i += 1
        else:
            out.append("+ " + new[j])
            j += 1
    out += ["- " + line for line in old[i:]]
    out += ["+ " + line for line in new[j:]]
    return out


if __name__ == "__main__":
    v1 = ["# Title", "intro", "body one", "body two", "end"]
    v2 = ["# Title", "new intro", "body one", "body two", "extra", "end"]
    cases = [(v1, v2), ([], ["a"]), (["a", "b"], []), (["a", "b", "c"], ["c", "b", "a"]), (v1, v1)]
    for a, b in cases:
        print(" | ".join(diff_lines(a, b)))
