def lower_bound(sorted_nums: list[int], target: int) -> int:
    lo, hi = 0, len(sorted_nums)
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_nums[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


if __name__ == "__main__":
    shelf = [100, 205, 205, 205, 310, 420, 999]
    for t in [50, 100, 205, 206, 420, 999, 1000]:
        print(f"{t} -> {lower_bound(shelf, t)}")
    print(f"empty -> {lower_bound([], 7)}")
    print(f"single -> {lower_bound([7], 7)} {lower_bound([7], 8)}")
