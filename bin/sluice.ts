#!/usr/bin/env node
// The `sluice` command (package.json "bin": dist/bin/sluice.js, compiled). A user's query module is
// usually TypeScript: tsx's loader is registered for the whole process (module.register, not tsx's
// namespaced tsImport, which would load a second copy of sluice), so the user's module and this CLI
// share one copy of sluice's classes.
import { register } from 'tsx/esm/api';

// Local tooling: the AWS SDK's notice about future Node versions is noise here.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
// Run from the TypeScript sources (in the repository, under `--import tsx`), a loader is already there.
if (!import.meta.url.endsWith('.ts')) register();
await import('./sluice-cli.js');
