//! [`Sessions`]: who is logged in. A login exchanges a configured token for a random
//! session id (256 bits from the operating system), kept in this process's memory with the
//! user, the role, a CSRF token of its own and an expiry; the browser holds the id in an
//! `HttpOnly`, `SameSite=Strict` cookie. Restarting the process logs everyone out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{ConsoleUser, Role};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "outbox_session";

/// The most sessions kept at once; the oldest goes first beyond it.
const MAX_SESSIONS: usize = 10_000;

/// A logged-in user.
#[derive(Debug, Clone)]
pub struct Session {
    /// Its id (the cookie's value).
    pub id: String,
    /// Who (the configured user name).
    pub user: String,
    /// What they may do.
    pub role: Role,
    /// The token every form of this session carries.
    pub csrf: String,
    expires: Instant,
}

/// The sessions of this process, and the users who may open one.
#[derive(Debug, Clone)]
pub struct Sessions {
    inner: Arc<Mutex<HashMap<String, Session>>>,
    users: Arc<Vec<(ConsoleUser, [u8; 32])>>,
    ttl: Duration,
}

impl Sessions {
    /// Sessions for `users`, each lasting `ttl`.
    pub fn new(users: &[ConsoleUser], ttl: Duration) -> Self {
        let users = users
            .iter()
            .map(|user| (user.clone(), digest(user.token.expose())))
            .collect();
        Self {
            inner: Arc::default(),
            users: Arc::new(users),
            ttl,
        }
    }

    /// How long a session lasts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The user whose token is `token`: every user's token is compared, each in constant
    /// time (on SHA-256 digests, so lengths do not show either).
    pub fn user_of(&self, token: &str) -> Option<&ConsoleUser> {
        let given = digest(token);
        let mut found = None;
        for (user, expected) in self.users.iter() {
            if bool::from(given.ct_eq(expected)) {
                found = Some(user);
            }
        }
        found
    }

    /// Opens a session for `user`; returns its id.
    ///
    /// # Errors
    /// The operating system's random source failed.
    pub fn open(&self, user: &ConsoleUser) -> Result<String, getrandom::Error> {
        let id = random_token()?;
        let session = Session {
            id: id.clone(),
            user: user.name.clone(),
            role: user.role,
            csrf: random_token()?,
            expires: Instant::now() + self.ttl,
        };
        let mut sessions = self.lock();
        let now = Instant::now();
        sessions.retain(|_, session| session.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, session)| session.expires)
                .map(|(id, _)| id.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(id.clone(), session);
        Ok(id)
    }

    /// The live session `id`, if any.
    pub fn get(&self, id: &str) -> Option<Session> {
        let mut sessions = self.lock();
        match sessions.get(id) {
            Some(session) if session.expires > Instant::now() => Some(session.clone()),
            Some(_) => {
                sessions.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends session `id`.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `given` is `expected`, in constant time.
pub fn same_token(given: &str, expected: &str) -> bool {
    bool::from(digest(given).ct_eq(&digest(expected)))
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// 32 random bytes from the operating system, in hexadecimal.
///
/// # Errors
/// The operating system's random source failed.
pub fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConsoleSettings, Role};

    #[test]
    fn tokens_open_sessions_that_expire() {
        let settings = ConsoleSettings::builder()
            .user("ana", Role::Operator, "ana-token-0123456789")
            .user("bo", Role::Reader, "bo-token-0123456789")
            .build()
            .unwrap();
        let sessions = Sessions::new(&settings.users, Duration::from_millis(50));
        assert!(sessions.user_of("wrong-token-0123456789").is_none());
        assert!(
            sessions.user_of("ana-token-012345678").is_none(),
            "a prefix is not enough"
        );
        let bo = sessions.user_of("bo-token-0123456789").unwrap();
        assert_eq!(bo.role, Role::Reader);
        let id = sessions.open(bo).unwrap();
        assert_eq!(id.len(), 64);
        let session = sessions.get(&id).unwrap();
        assert_eq!(session.user, "bo");
        assert_ne!(session.csrf, id);
        assert!(sessions.get("forged").is_none());
        std::thread::sleep(Duration::from_millis(80));
        assert!(sessions.get(&id).is_none(), "expired");
        let id = sessions.open(bo).unwrap();
        sessions.close(&id);
        assert!(sessions.get(&id).is_none(), "logged out");
        assert!(same_token("a", "a") && !same_token("a", "b"));
    }
}
