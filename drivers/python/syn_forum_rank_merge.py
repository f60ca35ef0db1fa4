def merge_top(shards: list[list[tuple[int, str]]], k: int) -> list[tuple[int, str]]:
    out = []
    pos = [0] * len(shards)
    while len(out) < k:
        best = -1
        for i, shard in enumerate(shards):
            if pos[i] >= len(shard):
                continue
            score, ident = shard[pos[i]]
            if best == -1:
                best = i
            else:
                top_score, top_ident = shards[best][pos[best]]
                if score > top_score or (score == top_score and ident < top_ident):
                    best = i
        if best == -1:
            break
        out.append(shards[best][pos[best]])
        pos[best] += 1
    return out


if __name__ == "__main__":
    a = [(90, "t3"), (70, "t1"), (70, "t9"), (10, "t4")]
    b = [(95, "t7"), (70, "t2"), (5, "t8")]
    c = []
    d = [(70, "t1"), (60, "t6")]
    print(merge_top([a, b, c], 4))
    print(merge_top([a, b, c, d], 10))
    print(merge_top([c, c], 3))
    print(merge_top([a], 0))
    print(merge_top([], 2))
    print(merge_top([d, a], 3))
