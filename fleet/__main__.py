"""`python -m fleet` and the `fleet` executable (pyproject.toml's [project.scripts]): the
collector paused while the command loads (fleet.collector.pause_start_up), then fleet.cli."""

from fleet.collector import pause_start_up

pause_start_up()

from fleet.cli import entry  # noqa: E402 - loaded under the pause, which is the point


def main() -> None:
    entry()


if __name__ == "__main__":
    main()
