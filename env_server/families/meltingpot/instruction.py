"""Each player's instruction for a Melting Pot substrate (Moria's own wording)."""

from __future__ import annotations

from env_server.families.meltingpot.substrates import TaskSpec
from env_server.families.meltingpot.text import SpriteTable

#: substrate name prefix -> a paragraph on its rules (what the substrate rewards)
RULES: tuple[tuple[str, str], ...] = (
    ("commons_harvest", "Apples grow on the grass. Walking onto an apple eats it: +1 reward. "
     "An apple regrows only near other apples, and faster the more apples are around it, so "
     "harvesting a patch to the last apple ends it for good. Your zapping beam can freeze "
     "other players for a while."),
    ("clean_up", "Apples grow in the orchard: walking onto one eats it (+1 reward). Apples grow "
     "only while the river is clean, and the river fills with pollution (Dirt) over time. Your "
     "cleaning beam (FIRE_CLEAN) removes dirt; your zapping beam (FIRE_ZAP) freezes other "
     "players for a while."),
    ("collaborative_cooking", "Cook tomato soup together: take tomatoes from a tomato "
     "dispenser and put three into a cooking pot (INTERACT with the cell ahead), wait for it "
     "to cook, take a dish from the dish dispenser, fill it at the pot, and deliver the soup at "
     "a delivery location. Each delivered soup rewards the players."),
    ("coins", "Coins of your colour and of the other player's colour appear. Collecting any "
     "coin rewards you; collecting a coin of the other player's colour costs them."),
)
MATRIX = ("Walk over resources to collect them (your INVENTORY counts them). Fire your "
          "interaction beam (INTERACT) at another player: both of you then get the reward of "
          "the matrix game ({game}) for the mix of resources each holds (each resource kind is "
          "one strategy), and your inventories are reset.")


def rules(name: str) -> str:
    if "_in_the_matrix" in name:
        game = name.split("_in_the_matrix")[0].replace("_", " ")
        return MATRIX.format(game=game)
    for prefix, text in RULES:
        if name.startswith(prefix):
            return text
    return "Earn as much reward as you can under the substrate's rules."


def build_instruction(spec: TaskSpec, index: int, num_players: int, table: SpriteTable,
                      max_steps: int) -> str:
    """The instruction of ``player_<index>``."""
    actions = "\n".join(f"- {a.name}: {a.description}" for a in spec.actions)
    window = spec.view
    return "\n".join([
        f"You are player_{index} in the Melting Pot substrate {spec.name}, a grid world "
        f"shared with {num_players - 1} other players who act at the same time as you. The "
        f"episode lasts at most {max_steps} steps (some substrates may end it earlier).",
        "",
        "Rules: " + rules(spec.name),
        "",
        "Your goal: earn as much reward as you can over the episode.",
        "",
        "Each step you see your surroundings as a grid of symbols: the cells "
        f"{window['forward']} ahead and {window['backward']} behind you, {window['left']} to "
        f"your left and {window['right']} to your right, turned so that the top row is the "
        "farthest ahead. Legend: " + table.legend() + ". Below the grid are the players and "
        "the things in view, with their offsets from you (ahead/behind, left/right).",
        "",
        "Actions (answer with exactly one name):",
        actions,
    ])
