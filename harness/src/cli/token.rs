//! `harness token`: publish tokens for the ingestion API.

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

use super::ConfigArg;
use results::default_database_url;
use results::index::Index;

#[derive(Debug, Args)]
pub struct DatabaseArg {
    /// The SQL index the server uses: sqlite://path or postgres://user@host/db
    /// [default: sqlite://<user data dir>/cloud-provider-harness/index.sqlite].
    #[arg(long, env = "DATABASE_URL", value_name = "URL")]
    pub database: Option<String>,
}

impl DatabaseArg {
    pub fn url(&self) -> String {
        self.database.clone().unwrap_or_else(default_database_url)
    }
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token that publishes the builds of one provider; it is printed once, on stdout.
    Create {
        /// The provider (one of providers.yaml).
        #[arg(long)]
        provider: String,
        /// Whose token it is (a CI system, a team), for `harness token list`.
        #[arg(long, default_value = "")]
        description: String,
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        database: DatabaseArg,
    },
    /// Revoke a token by its id (from `harness token list`): every replica refuses it at once.
    Revoke {
        id: i64,
        #[command(flatten)]
        database: DatabaseArg,
    },
    /// Every token: id, provider, when made, whether revoked, description (never the token).
    List {
        #[command(flatten)]
        database: DatabaseArg,
    },
}

pub async fn run_token(command: TokenCommand) -> Result<()> {
    match command {
        TokenCommand::Create { provider, description, config, database } => {
            let index = Index::open(&database.url()).await?;
            let created = results::tokens::create(&index, &config.load()?, &provider, &description).await?;
            eprintln!("token {} for provider {provider}; it is shown only now:", created.id);
            println!("{}", created.token);
        }
        TokenCommand::Revoke { id, database } => {
            let index = Index::open(&database.url()).await?;
            if !index.revoke_token(id, results::unix_now()).await? {
                bail!("no valid token with id {id} in {}: see harness token list", index.name());
            }
            println!("token {id} revoked");
        }
        TokenCommand::List { database } => {
            let index = Index::open(&database.url()).await?;
            for token in index.tokens().await? {
                let revoked = token.revoked_at.map_or("valid".to_owned(), |at| format!("revoked {}", time(at)));
                println!(
                    "{}\t{}\t{}\t{revoked}\t{}",
                    token.id,
                    token.provider,
                    time(token.created_at),
                    token.description
                );
            }
        }
    }
    Ok(())
}

fn time(epoch: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(epoch.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}
