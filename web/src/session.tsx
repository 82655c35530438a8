// The session as the dashboard knows it: who is logged in, the CSRF token, how sign-up works.
import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from 'react';
import { api, setCsrfToken, setSessionLostHandler, type SessionInfo } from './api';

interface SessionState {
  info: SessionInfo | undefined;
  error: string | undefined;
  refresh(): Promise<SessionInfo>;
  /** Adopts the session a login, sign-up or setup answered with. */
  adopt(info: SessionInfo): void;
  logout(): Promise<void>;
}

const SessionContext = createContext<SessionState | undefined>(undefined);

export function SessionProvider({ children }: { children: ReactNode }) {
  const [info, setInfo] = useState<SessionInfo>();
  const [error, setError] = useState<string>();

  const adopt = useCallback((next: SessionInfo) => {
    setCsrfToken(next.csrfToken);
    setInfo(next);
  }, []);

  const refresh = useCallback(async () => {
    const next = await api.get<SessionInfo>('/auth/session');
    adopt(next);
    return next;
  }, [adopt]);

  const logout = useCallback(async () => {
    await api.post('/auth/logout');
    setCsrfToken(undefined);
    await refresh();
  }, [refresh]);

  useEffect(() => {
    refresh().catch((err: Error) => setError(err.message));
    setSessionLostHandler(() => {
      refresh().catch(() => {});
    });
  }, [refresh]);

  return <SessionContext.Provider value={{ info, error, refresh, adopt, logout }}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionState {
  const state = useContext(SessionContext);
  if (!state) throw new Error('useSession outside SessionProvider');
  return state;
}
