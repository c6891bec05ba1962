// Argo CD's application controller (the default) or, with `repo-server` as the first argument, its repo
// server: the two processes a sync needs, in one binary so one build measures both.
package main

import (
	"os"

	controller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
)

func main() {
	cmd := controller.NewCommand()
	if len(os.Args) > 1 && os.Args[1] == "repo-server" {
		os.Args = append(os.Args[:1], os.Args[2:]...)
		cmd = reposerver.NewCommand()
	}
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
