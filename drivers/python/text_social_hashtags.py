def extract_tags(text: str) -> list[str]:
    tags = []
    for token in text.split():
        if not token.startswith("#"):
            continue
        tag = token[1:].rstrip(".,!?;:").lower()
        if not tag or tag[0].isdigit():
            continue
        if not all(c.isalnum() or c == "_" for c in tag):
            continue
        if tag not in tags:
            tags.append(tag)
    return tags


if __name__ == "__main__":
    posts = ["Loving the #Sunset at the beach! #travel #TRAVEL", "no tags here",
             "#  # #!! #1st #top10 #snake_case, #dash-tag",
             "Launch day!!! #jaclang #OpenSource. #jaclang?",
             "", "mid#word #Ünïcode #end"]
    for p in posts:
        print(f"{len(extract_tags(p))} {extract_tags(p)}")
