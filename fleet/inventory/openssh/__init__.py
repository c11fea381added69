"""OpenSSH's client configuration, emulated: ~/.ssh/config and ssh's command line read as OpenSSH
9 reads them, for the settings that say where and how fleet connects. `OpenSsh` is the one entry
point; the modules beside it are private to the package:

- _lexer.py: the words of a line; _options.py: what a keyword's value means, first value wins;
- _match.py: which lines apply (Host, Match); _reader.py: the files, Include, the passes;
- _apply.py: the result applied to a fleet Host; _proxy_command.py: ProxyCommand as an argv;
- _argv.py: ssh's command line (Ansible's ssh arguments).
"""

from fleet.inventory.openssh._config import OpenSsh

__all__ = ["OpenSsh"]
