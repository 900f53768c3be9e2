import { TokenStore } from '../../web/storage.js';

/** The console's copy of http.api_token: kept in this browser tab only (sessionStorage). */
export const token = new TokenStore('session', 'edge-gateway.console.token');
