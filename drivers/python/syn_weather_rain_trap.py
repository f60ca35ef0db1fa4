def trapped(heights: list[int]) -> int:
    if len(heights) < 3:
        return 0
    lo, hi = 0, len(heights) - 1
    left_max = right_max = water = 0
    while lo < hi:  # move the side with the lower wall
        if heights[lo] < heights[hi]:
            left_max = max(left_max, heights[lo])
            water += left_max - heights[lo]
            lo += 1
        else:
            right_max = max(right_max, heights[hi])
            water += right_max - heights[hi]
            hi -= 1
    return water


if __name__ == "__main__":
    cases = [[], [3, 0], [2, 0, 2], [0, 1, 0, 2, 1, 0, 1, 3, 2, 1, 2, 1], [4, 2, 0, 3, 2, 5],
             [1, 2, 3, 4], [5, 4, 1, 2], [3, 3, 3]]
    for c in cases:
        print(f"{c} -> {trapped(c)}")
