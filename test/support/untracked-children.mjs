// Loaded into every test process (package.json, tap's node-arg). tap puts its process tracker,
// @tapjs/processinfo, into NODE_OPTIONS of every process a test spawns, through process-on-spawn.
// The tracker exists for coverage, which this suite turns off; in each child it loads an
// off-thread module loader that roughly doubles the CPU of starting a gateway node (cli.test:
// 13.5 s of CPU with it, 7.8 s without). Listeners run in the order they were added, and
// tap's was added first, so this one sees and drops what it put in. test/unit/toolkit.test.ts
// checks that a spawned child no longer carries it.
import processOnSpawn from 'process-on-spawn'

processOnSpawn.addListener((child) => {
  const options = child.env.NODE_OPTIONS
  if (options) child.env.NODE_OPTIONS = options.split(/\s+/).filter((option) => !option.includes('@tapjs/processinfo')).join(' ')
})
