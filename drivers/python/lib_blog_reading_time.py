def reading_label(words: int, code_lines: int, images: int, wpm: int) -> str:
    if wpm <= 0:
        return "n/a"
    secs = -(-words * 60 // wpm)  # ceiling division
    secs += 5 * code_lines
    secs += 12 * min(images, 10) + 3 * max(images - 10, 0)
    if secs < 60:
        return "quick read"
    mins = -(-secs // 60)
    return "1 min read" if mins == 1 else f"{mins} min read"


if __name__ == "__main__":
    cases = [(100, 0, 0, 200), (200, 0, 0, 200), (201, 0, 0, 200), (1000, 20, 3, 250),
             (0, 0, 12, 200), (50, 2, 1, 0), (3000, 0, 15, 238), (0, 12, 0, 200)]
    for w, c, i, r in cases:
        print(f"words={w} code={c} images={i} wpm={r}: {reading_label(w, c, i, r)}")
