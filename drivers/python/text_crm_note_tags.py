def extract(note: str) -> dict[str, list[str]]:
    found = {"#": [], "@": []}
    for word in note.split():
        if len(word) < 2 or word[0] not in "#@":
            continue
        name = word[1:].rstrip(".,;:!?").lower()
        if name and name not in found[word[0]]:
            found[word[0]].append(name)
    return {"tags": sorted(found["#"]), "mentions": sorted(found["@"])}


if __name__ == "__main__":
    notes = ["Call @Ann about #renewal, cc @bob. #Renewal #Q3!", "no markers here",
             "# @ #!! @@double #a-b", ""]
    for n in notes:
        r = extract(n)
        print(f"tags={r['tags']} mentions={r['mentions']}")
