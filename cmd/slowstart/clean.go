package main

import (
	"github.com/spf13/cobra"
)

func newCleanCommand() *cobra.Command {
	return &cobra.Command{Use: "clean", Hidden: true}
}
