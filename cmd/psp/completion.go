package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// completionScripts are the shell functions that ask psp for completions
// (psp ... --generate-bash-completion lists the commands or flags that fit).
var completionScripts = map[string]string{
	"bash": `# psp completion for bash: source <(psp completion bash)
_psp_complete() {
	local cur opts
	COMPREPLY=()
	cur="${COMP_WORDS[COMP_CWORD]}"
	if [[ "$cur" == "-"* ]]; then
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
	return 0
}
complete -o bashdefault -o default -F _psp_complete psp
`,
	"zsh": `#compdef psp
# psp completion for zsh: source <(psp completion zsh)
_psp() {
	local -a opts
	local cur=${words[-1]}
	if [[ "$cur" == "-"* ]]; then
		opts=("${(@f)$(${words[@]:0:#words[@]-1} "$cur" --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ "${opts[1]}" != "" ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
compdef _psp psp
`,
}

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash or zsh",
		ArgsUsage: "bash|zsh",
		Description: "Completes commands and flags. Load it in the current shell with\n" +
			"  source <(psp completion bash)      # or zsh\n" +
			"or install it, e.g. psp completion bash > /etc/bash_completion.d/psp",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("completion: give the shell: bash or zsh")
			}
			script, ok := completionScripts[c.Args().First()]
			if !ok {
				return fmt.Errorf("completion: unknown shell %q (bash or zsh)", c.Args().First())
			}
			_, err := fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}
