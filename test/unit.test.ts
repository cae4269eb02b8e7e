import { runTestFilesOf } from './support/suite.js'

/** The tests that need no store, no server and no node (test/unit/), in one process. */
runTestFilesOf(new URL('./unit/', import.meta.url))
