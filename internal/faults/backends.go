package faults

// The backends the harness and its workers open by URL: each registers
// its schemes with sema.Register when linked in.
import (
	_ "github.com/sema-dev/sema/backend/etcd"     // etcd://
	_ "github.com/sema-dev/sema/backend/file"     // file://
	_ "github.com/sema-dev/sema/backend/postgres" // postgres://
	_ "github.com/sema-dev/sema/backend/redis"    // redis://
	_ "github.com/sema-dev/sema/backend/remote"   // http://
)
