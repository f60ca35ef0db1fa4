def render_line(line: str, users: list[str]) -> str:
    if line.startswith("> "):
        return "{quote}" + line[2:] + "{/quote}"
    out = []
    for word in line.split(" "):
        core = word.rstrip(",.!?")
        tail = word[len(core):]
        if core.startswith("@") and core[1:] in users:
            out.append("{user:" + core[1:] + "}" + tail)
        else:
            out.append(word)
    return " ".join(out)


if __name__ == "__main__":
    users = ["ana", "ben"]
    post = ["> ana wrote: use braces {like this}", "thanks @ana, that fixed it!",
            "cc @ben @zed @Ana.",
            "", ">no space so not a quote", "email me at x@ana or @ben?!"]
    for line in post:
        print(render_line(line, users))
