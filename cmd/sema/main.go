// Command sema runs commands under named locks and semaphores, inspects
// them, and serves the sema HTTP API. See "sema help".
package main

import (
	"os"

	"github.com/sema-dev/sema/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
