import { runTestFilesOf } from './support/suite.js'

/** The black-box tests of the HTTP API on in-process nodes (test/api/), in one process. */
runTestFilesOf(new URL('./api/', import.meta.url))
