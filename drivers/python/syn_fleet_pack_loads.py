def pack(loads: list[int], capacity: int) -> list[list[int]]:
    trucks = []
    for load in sorted((x for x in loads if x > 0), reverse=True):
        for truck in trucks:
            if sum(truck) + load <= capacity:
                truck.append(load)
                break
        else:
            trucks.append([load])
    return trucks


if __name__ == "__main__":
    cases = [([4, 8, 1, 4, 2, 1], 10), ([5, 5, 5, 5], 10), ([], 10), ([12, 3, 0, -2, 7], 10),
             ([9, 9, 9], 8), ([2, 2, 2, 2, 2, 2, 2], 5)]
    for loads, cap in cases:
        res = pack(loads, cap)
        print(f"{loads} cap={cap} -> {len(res)} trucks {res}")
