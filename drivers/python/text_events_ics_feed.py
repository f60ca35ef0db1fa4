def ics_to_json_lines(ics: str) -> list[str]:
    lines = []
    for raw in ics.split("\n"):
        if raw.startswith(" ") and lines:
            lines[-1] += raw[1:]  # a folded continuation line
        else:
            lines.append(raw)
    out = []
    event = None
    for line in lines:
        if line == "BEGIN:VEVENT":
            event = {}
        elif line == "END:VEVENT" and event is not None:
            if "DTSTART" in event and "SUMMARY" in event:
                d = event["DTSTART"]
                out.append(f'{{"day":"{d[0:4]}-{d[4:6]}-{d[6:8]}","time":"{d[9:11]}:{d[11:13]}",'
                           f'"title":"{event["SUMMARY"]}"}}')
            event = None
        elif event is not None and ":" in line:
            key, value = line.split(":", 1)
            event[key.split(";")[0]] = value
    return sorted(out)


if __name__ == "__main__":
    ics = "\n".join(["BEGIN:VCALENDAR", "BEGIN:VEVENT", "DTSTART;TZID=Europe/Oslo:20240601T093000",
                     "SUMMARY:Opening keyno", " te and welcome", "END:VEVENT", "BEGIN:VEVENT",
                     "SUMMARY:No start time", "END:VEVENT", "BEGIN:VEVENT",
                     "DTSTART:20240531T180000Z",
                     "SUMMARY:Speaker dinner", "LOCATION:Harbor", "END:VEVENT",
                     "SUMMARY:outside any event", "END:VCALENDAR"])
    for line in ics_to_json_lines(ics):
        print(line)
    print(ics_to_json_lines(""))
