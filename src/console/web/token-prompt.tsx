import { h, render, type TargetedSubmitEvent } from 'preact';
import { token } from './token.js';

let prompt: Promise<string | null> | null = null;

/** Resolves with the token the user typed, or null when cancelled (a modal on top of the page). */
export function askToken(message: string): Promise<string | null> {
  if (prompt) return prompt;
  prompt = new Promise((resolve) => {
    const host = document.createElement('div');
    document.body.appendChild(host);
    const done = (v: string | null) => {
      render(null, host);
      host.remove();
      prompt = null;
      resolve(v);
    };
    const onSubmit = (e: TargetedSubmitEvent<HTMLFormElement>) => {
      e.preventDefault();
      const v = (e.currentTarget.elements.namedItem('token') as HTMLInputElement).value.trim();
      if (v) token.set(v);
      done(v || null);
    };
    render(
      <div class="modal" role="dialog" aria-modal="true">
        <form class="modal-box" onSubmit={onSubmit}>
          <h3>API token needed</h3>
          <p>{message}</p>
          <input name="token" type="password" autocomplete="off" data-testid="token-input" placeholder="http.api_token" autofocus />
          <div class="row">
            <button class="primary" type="submit" data-testid="token-save">Use token</button>
            <button type="button" onClick={() => done(null)}>Cancel</button>
          </div>
          <p class="muted small">Kept in this browser tab only (sessionStorage).</p>
        </form>
      </div>,
      host,
    );
  });
  return prompt;
}
