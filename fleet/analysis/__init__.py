"""Pure functions over runs: `facts` (probe data → addressable facts), `diff` (across hosts),
`drift` (across runs). Nothing here touches the network or the terminal."""
