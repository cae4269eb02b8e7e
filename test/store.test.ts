import { runTestFilesOf } from './support/suite.js'

/** The store's and the caches' tests against this pass's store (test/store/), in one process. */
runTestFilesOf(new URL('./store/', import.meta.url))
