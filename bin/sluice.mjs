#!/usr/bin/env node
// The `sluice` command (package.json "bin"). Sluice is written in TypeScript and not compiled:
// tsx's ESM loader is registered here, then the CLI is imported as TypeScript.
import { register } from 'tsx/esm/api';

// Local tooling: the AWS SDK's notice about future Node versions is noise here.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
register();
await import(new URL('./sluice-cli.ts', import.meta.url).href);
