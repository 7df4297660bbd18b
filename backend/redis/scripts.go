package redis

import (
	"embed"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// The server-side half of the backend: one Lua script per operation, each
// run atomically by Redis (EVALSHA, loaded again with EVAL after a
// NOSCRIPT). The scripts that change a name share lua/common.lua.
//
// Every script starts with a "#!lua" line (Redis ≥ 7): Redis then refuses
// to start a writing script when it is out of memory instead of failing it
// halfway, checks that it touches only the keys it declares (one cluster
// slot), and replicates its effects, so reading TIME inside it is allowed.

//go:embed lua/*.lua
var luaFiles embed.FS

func lua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

// scriptSet is the backend's scripts, and their texts for SCRIPT LOAD.
type scriptSet struct {
	acquire, release, renew, dequeue, force, describe *goredis.Script
	sources                                           []string
}

// scripts are built on first use, not at program start: hashing them
// would cost every run of the sema binary, whatever its backend.
var scripts = sync.OnceValue(func() *scriptSet {
	s := &scriptSet{}
	s.acquire = s.writer("acquire.lua")
	s.release = s.writer("release.lua")
	s.renew = s.writer("renew.lua")
	s.dequeue = s.writer("dequeue.lua")
	s.force = s.writer("force.lua")
	s.describe = s.add("#!lua flags=no-writes\n" + lua("describe.lua"))
	return s
})

func (s *scriptSet) add(src string) *goredis.Script {
	s.sources = append(s.sources, src)
	return goredis.NewScript(src)
}

// writer builds a script that changes a name: its own file with
// lua/common.lua spliced in at the line "--@common" (or at the top). The
// code above that line is a fast path that must not use the shared code:
// it runs, and returns, before the shared functions are even defined.
func (s *scriptSet) writer(name string) *goredis.Script {
	src, common := lua(name), lua("common.lua")
	if before, after, ok := strings.Cut(src, "--@common\n"); ok {
		// The rest runs as a function of its own, so that the fast path's
		// call of the script sets up only the few locals it uses.
		src = before + "local function general()\n" + common + after + "end\nreturn general()\n"
	} else {
		src = common + src
	}
	return s.add("#!lua\n" + src)
}
