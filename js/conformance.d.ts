import type { FsProvider, ShellProvider } from '../index';

export interface ConformanceOptions {
  /** A fresh, empty workspace for each check: a provider (FsProvider, ShellProvider or both) or { fs, shell }. */
  makeProvider(): unknown | Promise<unknown>;
  /** The runner's test(name, fn). */
  test(name: string, fn: () => Promise<void>): unknown;
  /** The runner's describe(name, fn), to group the checks. */
  describe?(name: string, fn: () => void): unknown;
  name?: string;
}

export declare function runConformance(options: ConformanceOptions): void;

export declare class ConformanceError extends Error {
  readonly name: 'ConformanceError';
}
