import { h } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

/**
 * The API token dialog: Save keeps the token on the panel (and runs what waited for it), Forget
 * removes it, Cancel closes.
 */
export function TokenDialog({ text, onSave, onForget, onCancel }: { text: string; onSave: (token: string) => void; onForget: () => void; onCancel: () => void }) {
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    input.current?.focus();
  }, [text]);
  return (
    <div id="dialog" role="dialog" aria-modal="true">
      <div class="box">
        <strong>API token</strong>
        <p id="dialogText">{text}</p>
        <input type="password" id="tokenInput" ref={input} data-testid="token-input" autocomplete="off" placeholder="token" />
        <div class="actions">
          <button class="stop" id="tokenSave" type="button" data-testid="token-save" onClick={() => onSave(input.current?.value.trim() ?? '')}>
            Save
          </button>
          <button class="discard" id="tokenForget" type="button" onClick={onForget}>
            Forget
          </button>
          <button class="discard" id="tokenCancel" type="button" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </div>
    </div>
  );
}
