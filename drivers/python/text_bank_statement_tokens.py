def tokenize(line: str) -> list[str]:
    tokens = []
    word = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "#":
            break  # the rest of the line is a comment
        if ch == "'" or ch.isspace():
            if word:
                tokens.append(word)
                word = ""
            if ch == "'":
                end = line.find("'", i + 1)
                if end == -1:
                    end = len(line)
                tokens.append(line[i + 1:end])
                i = end
        else:
            word += ch
        i += 1
    if word:
        tokens.append(word)
    return tokens


if __name__ == "__main__":
    lines = ["2024-03-01 DEBIT 45.20 'Corner Cafe' #food",
             "2024-03-02   CREDIT 1200.00 'ACME payroll'",
             "2024-03-03 DEBIT 9.99 '' # empty memo", "# whole line comment",
             "2024-03-04 FEE 2.50 'unterminated memo", ""]
    for ln in lines:
        print(tokenize(ln))
