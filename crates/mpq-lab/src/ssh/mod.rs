//! The SSH testbed (`testbed: ssh`): experiments on two real hosts, each reached over SSH,
//! described by a hosts file ([`hosts`], seed 000 listing 4.1). [`remote`] runs commands and
//! copies files through the system's OpenSSH client, [`exec`] runs planned runs there
//! (mpq's own transports; [`external`] the implementation folders),
//! [`samples`] reads what the endpoint wrapper measured on the hosts and [`profile`] records
//! the endpoints' CPU profiles there (`--profile`).

pub mod exec;
pub mod external;
pub mod hosts;
pub mod profile;
pub mod remote;
pub mod samples;

pub use exec::{check, SshTestbed};
pub use hosts::Hosts;
