def parse_command(line: str) -> list[str]:
    s = line.strip()
    if not s.startswith("/"):
        return []
    tokens = []
    current = ""
    quoted = False
    started = False  # a token is open (it may be an empty quoted one)
    for ch in s[1:]:
        if ch == " " and not quoted:
            if started:
                tokens.append(current)
            current, started = "", False
            continue
        if ch == '"':
            quoted = not quoted
        else:
            current += ch
        started = True
    if started:
        tokens.append(current)
    if tokens:
        tokens[0] = tokens[0].lower()
    return tokens


if __name__ == "__main__":
    lines = ["/MUTE ben 10m", "hello /not a command", '  /topic "Release planning  Q3" now',
             '/nick "" x', "/kick   cai    spam", "/", '/me waves "to everyone']
    for line in lines:
        print(f"{parse_command(line)}")
