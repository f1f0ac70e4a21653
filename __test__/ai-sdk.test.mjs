// corral/ai-sdk with the real `ai` package, both majors (6 and 7), driven by its MockLanguageModelV3:
// a multi-step session with tool calls, a WorkspaceError the model reads, an image through
// toModelOutput, approval, and an abort that kills a running command.
import { describe, it, expect, afterAll } from 'vitest';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ai6 from 'ai6';
import * as ai7 from 'ai';
import { MockLanguageModelV3 as Mock6 } from 'ai6/test';
import { MockLanguageModelV3 as Mock7 } from 'ai/test';
import { NodeWorkspace, createFsTools, createShellTool } from 'corral';
import { toAiSdkTools } from 'corral/ai-sdk';
import { tempTree, scriptedAiModel } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));

const scripted = scriptedAiModel;

const toolResults = (prompt) => prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content);

// On Windows the shell is cmd.exe: the commands written in `sh` have a form for it beside them.
const win = process.platform === 'win32';
const CAT_MATH = win ? 'type src\\math.js' : 'cat src/math.js';

for (const [major, ai, Mock] of [['6', ai6, Mock6], ['7', ai7, Mock7]]) {
  describe(`toAiSdkTools with ai ${major}`, () => {
    it('runs a multi-step session: reads, a refused path the model reads, an edit, the tests', async () => {
      const t = tempTree({ 'src/math.js': 'export const add = (a, b) => a - b;\n' });
      trees.push(t);
      const ws = new NodeWorkspace({ root: t.root });
      const tools = toAiSdkTools([...createFsTools(ws), createShellTool(ws, { needsApproval: false, allow: [CAT_MATH] })], { ai });
      const seen = [];
      const model = scripted(Mock, [
        [['read_file', { path: 'src/math.js' }], ['read_file', { path: '../outside' }]],
        [['edit_file', { path: 'src/math.js', old_string: 'a - b', new_string: 'a + b' }]],
        [['shell', { command: CAT_MATH }]],
      ], seen);
      const result = await ai.generateText({ model, tools, prompt: 'fix add', stopWhen: ai.stepCountIs(10) });
      expect(result.text).toBe('done');
      const outputs = toolResults(seen.at(-1)).map((p) => p.output);
      expect(outputs[0]).toEqual({ type: 'text', value: ' 1\texport const add = (a, b) => a - b;' });
      expect(outputs[1]).toMatchObject({ type: 'json', value: { error: 'WorkspaceError', toolName: 'read_file', message: expect.stringContaining('outside the workspace') } });
      expect(outputs[2]).toEqual({ type: 'text', value: 'Edited src/math.js: replaced 1 occurrence.' });
      expect(outputs[3]).toMatchObject({ type: 'json', value: { exitCode: 0, stdout: 'export const add = (a, b) => a + b;\n' } });
    });

    it('sends an image through toModelOutput', async () => {
      const t = tempTree({});
      trees.push(t);
      const png = Buffer.from('89504e470d0a1a0a0000000d494844520000000200000002080600000000000000', 'hex');
      writeFileSync(join(t.root, 'a.png'), png);
      const tools = toAiSdkTools(createFsTools(new NodeWorkspace({ root: t.root }), { readImages: true }), { ai });
      const seen = [];
      await ai.generateText({ model: scripted(Mock, [[['read_file', { path: 'a.png' }]]], seen), tools, prompt: 'look', stopWhen: ai.stepCountIs(5) });
      const [part] = toolResults(seen.at(-1));
      expect(part.output.type).toBe('content');
      expect(part.output.value[1]).toMatchObject({ mediaType: 'image/png', data: png.toString('base64') });
    });

    it('passes approval on as needsApproval', async () => {
      const t = tempTree({});
      trees.push(t);
      const tools = toAiSdkTools([createShellTool(new NodeWorkspace({ root: t.root }), { needsApproval: (c) => c !== 'true' })], { ai });
      expect(await tools.shell.needsApproval({ command: 'true' }, { toolCallId: 'x', messages: [] })).toBe(false);
      expect(await tools.shell.needsApproval({ command: 'rm -rf x' }, { toolCallId: 'x', messages: [] })).toBe(true);
    });

    it('an abort of the session kills the running command', async () => {
      const t = tempTree({});
      trees.push(t);
      const tools = toAiSdkTools([createShellTool(new NodeWorkspace({ root: t.root }), { needsApproval: false })], { ai });
      const ac = new AbortController();
      const run = ai.generateText({ model: scripted(Mock, [[['shell', { command: win ? 'type nul > started& ping -n 4 127.0.0.1 >nul& type nul > marker' : 'touch started; sleep 3; touch marker' }]]], []), tools, prompt: 'wait', abortSignal: ac.signal, stopWhen: ai.stepCountIs(3) });
      // The command ran (the positive control), then the session is aborted.
      for (let i = 0; i < 200 && !existsSync(join(t.root, 'started')); i++) await new Promise((r) => setTimeout(r, 25));
      expect(existsSync(join(t.root, 'started'))).toBe(true);
      const started = Date.now();
      ac.abort();
      await run.catch(() => {});
      expect(Date.now() - started).toBeLessThan(2500);
      await new Promise((r) => setTimeout(r, 3500));
      expect(existsSync(join(t.root, 'marker'))).toBe(false);
    });
  });
}
