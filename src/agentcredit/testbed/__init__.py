"""What only the tiny CPU testbed needs: its base policy (warm start, build, shipped artefact), the
plan notes its searcher writes, turn windows, and the answer prior its figures are read against.
Real models never import this package."""
