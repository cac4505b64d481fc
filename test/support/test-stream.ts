/** The testStream DSL now ships with the package (`sluice/testing`); tests keep importing it from here. */
export * from '../../lib/testing/test-stream.js';
