"""The command line of the scripts that run one scenario at many points: KEY=VALUE settings applied
to every point, checked against the scenario before any point runs (bad ones: one line, exit 2)."""

import argparse
import sys

import steer


def settings_for_every_point(scenario: str, description: str) -> list[str]:
    arguments = argparse.ArgumentParser(description=description)
    arguments.add_argument("settings", nargs="*", metavar="KEY=VALUE", help=f"a setting of {scenario} for every point")
    settings = arguments.parse_args().settings
    try:
        steer.resolve(scenario, settings)
    except steer.ScenarioError as error:
        print(f"{arguments.prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    return settings
