package cli

// The backends the command line opens by URL: each registers its schemes
// with sema.Register when linked in.
import (
	_ "github.com/sema-dev/sema/backend/etcd"     // etcd://, etcds://
	_ "github.com/sema-dev/sema/backend/file"     // file://
	_ "github.com/sema-dev/sema/backend/mem"      // mem://
	_ "github.com/sema-dev/sema/backend/postgres" // postgres://, postgresql://
	_ "github.com/sema-dev/sema/backend/redis"    // redis://, rediss://
	_ "github.com/sema-dev/sema/backend/remote"   // http://, https://
)
