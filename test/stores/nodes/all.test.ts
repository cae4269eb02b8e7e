import { runTestFilesOf } from '../../support/suite.js'

// This folder runs as one process (test/support/suite.ts says why): every test file beside this one.
runTestFilesOf(new URL('./', import.meta.url))
