"""Fixed word lists the synthetic world builds its names from (no downloads, modest vocabulary).

Lists are deliberately small and share words across entity types ("Harbor Press", "Silver Harbor")
so that one obvious query surfaces several look-alike pages. No name may contain a relation cue
word (see `sentences.CUES`); `tests/test_world.py` checks that.
"""

from __future__ import annotations

FEMALE_FIRST = (
    "Anna", "Clara", "Edith", "Greta", "Helena", "Ines", "Julia", "Lena", "Maria", "Nora",
    "Olga", "Rosa", "Sofia", "Tessa", "Vera", "Alma", "Ida", "Mira", "Elsa", "Lucia",
)
MALE_FIRST = (
    "Anton", "Bruno", "Carl", "Dario", "Emil", "Felix", "Hugo", "Ivan", "Jonas", "Karl",
    "Leon", "Marco", "Nils", "Oskar", "Pavel", "Rudi", "Simon", "Tomas", "Viktor", "Walter",
)
SURNAMES = (
    "Voss", "Harlan", "Brandt", "Keller", "Moreau", "Lind", "Ashby", "Corwin", "Dekker", "Falk",
    "Gruber", "Holm", "Ivers", "Jansen", "Krall", "Lorenz", "Maddox", "Nyberg", "Ortega", "Pike",
    "Quist", "Rask", "Sauer", "Tanner", "Ulrich", "Vance", "Wendt", "Yates", "Zeller", "Bauer",
)

PLACE_HEADS = (
    "Brel", "Cast", "Dun", "Elm", "Fen", "Gar", "Hal", "Ivel", "Kel", "Lor",
    "Mar", "Nor", "Ost", "Pel", "Quen", "Ros", "Sel", "Tam", "Var", "Wyn",
)
PLACE_TAILS = ("moor", "ford", "wick", "dale", "stead", "holm", "bury", "mere", "gate", "ton")
REGIONS = ("Ostra", "Velmar", "Caldor", "Surrey Vale", "Northmark", "Lowen", "Istria Coast", "Brennar")

ORG_WORDS = (
    "Harbor", "Kestrel", "Northwind", "Granite", "Amber", "Willow", "Copper", "Lantern", "Falcon",
    "Meadow", "Cobalt", "Juniper", "Summit", "Beacon", "Ember", "Saffron", "Tidewater", "Ironwood",
    "Bluebell", "Redcliff",
)
# Organisation kind -> (what the intro line calls it, name suffixes, kind of work it releases, creator role)
ORG_KINDS = {
    "publisher": ("publisher", ("Press", "Books", "House"), "novel", "writer"),
    "label": ("record label", ("Records", "Sound", "Music"), "album", "musician"),
    "studio": ("film studio", ("Pictures", "Films", "Studios"), "film", "director"),
    "workshop": ("device maker", ("Works", "Labs", "Devices"), "device", "engineer"),
    "games": ("game studio", ("Games", "Interactive", "Arcade"), "game", "designer"),
}
OTHER_ROLES = ("painter", "chemist", "teacher", "pilot", "architect", "sculptor", "editor", "lawyer")

WORK_ADJECTIVES = (
    "Silver", "Quiet", "Hidden", "Crimson", "Broken", "Distant", "Golden", "Paper",
    "Winter", "Hollow", "Bright", "Silent", "Last", "Second", "Open", "Glass",
)
WORK_NOUNS = (
    "Harbor", "Lantern", "Orchard", "River", "Garden", "Signal", "Mirror", "Compass",
    "Tide", "Meadow", "Bridge", "Window", "Engine", "Letter", "Voyage", "Tower",
)

EVENT_WORDS = ("Golden", "Amber", "Northern", "Autumn", "Spring", "River", "Lantern", "Copper", "Silver", "Willow")
EVENT_NOUNS = ("Reed", "Crown", "Harvest", "Star", "Oak", "Wave", "Falcon", "Stone")
# Event kind -> words the name ends with
EVENT_KINDS = {"festival": "Festival", "fair": "Fair", "cup": "Cup", "gala": "Gala", "expo": "Expo"}


def slug(name: str) -> str:
    return "-".join(name.lower().split())
