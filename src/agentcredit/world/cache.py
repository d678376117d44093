"""On-disk cache of generated worlds, keyed by the world config and the generator's source.

Hashing the source of this package means editing the generator never serves a stale world.
"""

from __future__ import annotations

import random
from pathlib import Path

from agentcredit.common.paths import cache_dir, stable_hash
from agentcredit.world.config import WorldConfig
from agentcredit.world.generator import World, generate_world


def world_source_hash() -> str:
    folder = Path(__file__).parent
    return stable_hash([(p.name, p.read_text()) for p in sorted(folder.glob("*.py"))])


def world_cache_path(cfg: WorldConfig) -> Path:
    return cache_dir() / "worlds" / f"{stable_hash([cfg.as_dict(), world_source_hash()])}.json"


def load_or_generate_world(cfg: WorldConfig, use_cache: bool = True) -> World:
    if not use_cache:
        return generate_world(cfg)
    path = world_cache_path(cfg)
    if path.is_file():
        return World.from_json(path.read_text())
    world = generate_world(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{random.getrandbits(32)}")  # concurrent builders never see half a file
    tmp.write_text(world.to_json())
    tmp.replace(path)
    return world
